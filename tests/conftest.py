import os

# Keep TensorFlow's C++ start-up chatter out of test logs.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
