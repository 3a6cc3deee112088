"""Exit statuses, shared by the command line and the Python API (``ProbeResult.exit_status``,
``AuditResult.exit_status``), so a script and a CI job read a run the same way."""

from __future__ import annotations

#: Everything that was judged conforms.
EXIT_OK = 0
#: Findings: a MUST-level rule was broken (or a routing finding, for the audit).
EXIT_FINDINGS = 1
#: Bad arguments, unreadable input, not a capture, a missing Java or pyspark.
EXIT_USAGE = 2
#: A bug in mqttaudit.
EXIT_INTERNAL = 3
#: Nothing, or too little, could be judged: the target was unreachable, refused us or is not an MQTT broker, no MQTT
#: was captured, nothing was given to decode.
EXIT_INCOMPLETE = 4
#: Ctrl-C or SIGTERM.
EXIT_INTERRUPTED = 130
