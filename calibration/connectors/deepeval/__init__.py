"""deepeval: what role-rubric reads from it and writes to it."""
