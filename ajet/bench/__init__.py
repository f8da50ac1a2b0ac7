"""`ajet bench`: load testing of OpenAI-compatible servers (`load`)."""
