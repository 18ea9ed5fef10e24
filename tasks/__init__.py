"""Task families: each module builds datasets and declares what a task is (length, vocab, metric)."""
