-- A job refused for a reason waiting cannot fix (knowledge.v1.RefusalReason, e.g. QUOTA_EXHAUSTED)
-- ends FAILED without a retry; its document keeps the reason, as ErrorInfo.reason names it, beside
-- the error's words. NULL for every other state or failure; cleared when the document is queued again.
ALTER TABLE documents ADD COLUMN refusal_reason text CHECK (refusal_reason ~ '^[A-Z][A-Z_]*$');
