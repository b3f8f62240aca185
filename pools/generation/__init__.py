"""Generation with its journal: sample candidates and judge them through the client into a resumable work dir, then build a pool; record live runs as a pool."""
