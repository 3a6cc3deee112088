"""mqttaudit: an MQTT conformance auditor.

Layers (each imports only from the ones before it): spec, codec, topics, then the tools built on them.
"""

__version__ = "0.1.0"
