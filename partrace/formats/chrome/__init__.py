"""Chrome's Trace Event Format (JSON, opened by chrome://tracing and ui.perfetto.dev):
the line encoder of the Chrome JSON output (output/chrome_sink.py)."""
