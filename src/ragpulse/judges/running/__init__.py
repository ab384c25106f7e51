"""What runs any judge: child processes, the wire format, retries, the breaker and the budget."""
