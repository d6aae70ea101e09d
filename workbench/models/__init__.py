"""Model in: a sample name or an ONNX file turned into a tunable Relax module and its shapes."""
