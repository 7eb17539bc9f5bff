"""TensorFlow helpers shared by trainers, reward providers and export (below all three):
compiled functions, the fused Adam, and TF -> ONNX conversion. Importing the package itself
imports nothing; ``opsets`` imports no TensorFlow either (the CLI checks ``--opset`` with it).
"""
