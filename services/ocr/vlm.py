"""Vision-language readers used only when Tesseract fails: OpenAI-compatible chat (vLLM) or Gemini.

No VLM weights can be obtained on the development machines, so the OpenAI adapter is tested against
a local stand-in server that speaks the same protocol (tests/support/vlm_standin.py); the Gemini
adapter builds its request with the google-genai SDK's types and runs only with an API key.
"""

from __future__ import annotations

import abc
import base64
import io

import httpx
from PIL import Image

from services.bootstrap.errors import DependencyUnavailable

PROMPT = ("이 이미지에 있는 글자를 그대로 옮겨 적으세요. 줄바꿈을 유지하고 설명은 붙이지 마세요. "
          "Transcribe every piece of text in this image exactly, line by line, with no commentary.")


def png_bytes(image: Image.Image) -> bytes:
    """PNG encoding of an image (what is sent to the VLM)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


class VisionReader(abc.ABC):
    """Reads the text of one image with a vision-language model."""

    name: str = "vlm"

    @abc.abstractmethod
    async def read(self, image: Image.Image, timeout_s: float) -> str:
        """The transcribed text; raises DependencyUnavailable when the model cannot answer."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class OpenAIVisionReader(VisionReader):
    """POST {base_url}/chat/completions with the image as a base64 data URL (OpenAI vision protocol)."""

    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str = "", max_tokens: int = 1024) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.max_tokens = max_tokens
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(headers=headers)

    def request_body(self, image: Image.Image) -> dict:
        """The chat request for one image."""
        data_url = "data:image/png;base64," + base64.b64encode(png_bytes(image)).decode("ascii")
        return {"model": self.model, "temperature": 0, "max_tokens": self.max_tokens, "messages": [
            {"role": "user", "content": [{"type": "text", "text": PROMPT},
                                         {"type": "image_url", "image_url": {"url": data_url}}]}]}

    async def read(self, image: Image.Image, timeout_s: float) -> str:
        """Transcribe via the endpoint."""
        try:
            resp = await self._http.post(self.url, json=self.request_body(image), timeout=timeout_s)
            resp.raise_for_status()
            body = resp.json()
            content = body["choices"][0]["message"]["content"]
        except httpx.TimeoutException:
            raise DependencyUnavailable(f"VLM at {self.url} timed out after {timeout_s:.1f}s") from None
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as err:
            raise DependencyUnavailable(f"VLM at {self.url} failed: {type(err).__name__}: {err}") from None
        if isinstance(content, list):  # some servers answer with content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(content or "").strip()

    async def close(self) -> None:
        """Close the HTTP pool."""
        await self._http.aclose()


class GeminiVisionReader(VisionReader):
    """Gemini through google-genai (needs an API key; unreachable from the development machines)."""

    name = "gemini"

    def __init__(self, model: str, api_key: str) -> None:
        from google import genai

        self.model = model
        self._client = genai.Client(api_key=api_key)

    @staticmethod
    def request(image: Image.Image, timeout_s: float):
        """(contents, config) of one transcription call, built with the SDK's types."""
        from google.genai import types

        contents = types.Content(role="user", parts=[
            types.Part.from_bytes(data=png_bytes(image), mime_type="image/png"), types.Part.from_text(text=PROMPT)])
        config = types.GenerateContentConfig(temperature=0, http_options=types.HttpOptions(
            timeout=int(timeout_s * 1000)))
        return contents, config

    async def read(self, image: Image.Image, timeout_s: float) -> str:
        """Transcribe via Gemini."""
        from google.genai import errors

        contents, config = self.request(image, timeout_s)
        try:
            resp = await self._client.aio.models.generate_content(model=self.model, contents=contents, config=config)
        except (errors.APIError, httpx.HTTPError, OSError) as err:
            raise DependencyUnavailable(f"Gemini failed: {type(err).__name__}: {err}") from None
        return (resp.text or "").strip()


def make_reader(kind: str, url: str, model: str, api_key: str) -> VisionReader | None:
    """The configured reader, or None when the fallback is off (no URL / no key)."""
    if kind == "openai" and url:
        return OpenAIVisionReader(url, model, api_key)
    if kind == "gemini" and api_key:
        return GeminiVisionReader(model, api_key)
    return None
