"""What any LLM call of ragpulse shares: text fenced as data, and tolerant parsing of replies."""
