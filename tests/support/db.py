"""What the tests' PostgreSQL schema is migrated with."""

TEST_DIMENSION = 384  # all-MiniLM-L6-v2, the model the tests and the embedded stack use
