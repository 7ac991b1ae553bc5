"""The handlers' logging: redaction of secrets, and lazy X-Ray tracing."""
