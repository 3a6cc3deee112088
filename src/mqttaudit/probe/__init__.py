"""Live probing: real brokers on loopback, and the conversations the auditor holds with them."""
