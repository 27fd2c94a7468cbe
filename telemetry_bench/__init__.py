"""The benchmark's inspect_ai extension: tasks registered through the `inspect_ai` entry point (`_registry`)."""
