-- Platform-wide corpora (tenant_id NULL, is_system) are read by every tenant (issue 16), so they
-- hold only material of the GENERAL band (may be shared beyond a tenant): any other band is
-- refused when such a corpus is created or changed. The ones that exist (created by an operator
-- before this rule, with the default band) become GENERAL: until now their documents were keyed
-- to the tenant that wrote them and read by no other tenant.
-- (0024's trigger on the band fires now, so no event is pending when the table is altered.)
SET CONSTRAINTS corpora_scope_generation IMMEDIATE;
UPDATE corpora SET confidentiality = 'GENERAL' WHERE tenant_id IS NULL AND confidentiality <> 'GENERAL';
ALTER TABLE corpora ADD CONSTRAINT corpora_platform_general CHECK (tenant_id IS NOT NULL OR confidentiality = 'GENERAL');
