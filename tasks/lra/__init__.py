"""Long Range Arena tasks."""
