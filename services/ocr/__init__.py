"""OCR service: Tesseract kor+eng first, a VLM only when OCR fails; multi-page jobs in Redis."""
