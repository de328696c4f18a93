"""Personal data in Korean text (and OCR output): recognizers per kind, a detector, masking."""
