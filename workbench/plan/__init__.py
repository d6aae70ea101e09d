"""What gets tuned: the model's tasks, the budget's choice among them, and their shards."""
