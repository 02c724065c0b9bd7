"""The parallel engine: plan work, decode, exchange, merge, hand rows to a sink.

It knows the format interface (``partrace.formats.base``) and the data model,
never a particular format or writer.
"""
