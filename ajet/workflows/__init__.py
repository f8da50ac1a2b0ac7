"""Built-in workflows, picked by name with the `workflow` config group (`workflow=chat`)."""
