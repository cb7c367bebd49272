"""The config: the tree under conf/ and composing it, the typed schemas, the checks run before any data is
loaded, and what fills a config saved by an earlier version. Imports the engine's errors only."""
