"""Perfetto's protobuf trace format (ui.perfetto.dev, trace_processor): an encoder only.

A trace file is a ``Trace`` message: ``repeated TracePacket packet = 1``, so
it is a concatenation of ``0x0A <varint length> <TracePacket bytes>`` and
files (or parts of files) concatenate into a valid trace.  The field numbers
used by encode.py are those of perfetto's protos/perfetto/trace/*.proto,
checked by tests/output/test_perfetto.py against ``perfetto_trace_pb2``.
"""
