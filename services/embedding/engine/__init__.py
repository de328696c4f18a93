"""Inference engines behind one interface, and the e5 tokenizer."""
