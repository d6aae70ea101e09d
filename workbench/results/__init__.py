"""After tuning: merge, compile, verify and time the model; sweep it over slices; recommend a tuning slice."""
