"""tftrainers: TensorFlow 2 / Keras trainers for game and simulation agents."""
