"""OCR jobs through the OCR service."""
