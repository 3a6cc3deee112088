"""The ``mqttaudit`` command line: thin commands over the library."""
