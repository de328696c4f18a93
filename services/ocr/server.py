"""Builds the OCR service: Tesseract pool, optional VLM reader, extractor, Redis job store, servicer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from mesh.ocr.v1 import ocr_pb2 as pb
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from services.bootstrap.health import Dependency, Requirement
from services.bootstrap.lifecycle import stop
from services.bootstrap.server import MeshServer, ServiceRegistration, create_server
from services.ocr.config import OcrSettings
from services.ocr.engine import TesseractPool
from services.ocr.enhance import Enhance
from services.ocr.extractor import CleanPage, Extractor, FallbackPolicy
from services.ocr.filereader import FileReader
from services.ocr.imaging import Limits, Preprocess
from services.ocr.jobs import JobStore
from services.ocr.sandbox import Budget, ReadingProcesses
from services.ocr.servicer import OcrServicer
from services.ocr.vlm import VisionReader, make_reader
from services.runtime.errors import StartupError

SERVICE = pb.DESCRIPTOR.services_by_name["OcrService"]


@dataclass
class OcrService:
    """A created OCR server, its extractor and job store."""

    mesh: MeshServer
    extractor: Extractor
    jobs: JobStore

    @property
    def port(self) -> int:
        """The bound gRPC port."""
        return self.mesh.port

    async def warm_up(self) -> None:
        """Run one tiny image through every engine (off the event loop), start the job workers, then warm.

        Extract is SERVING from here on; jobs (``mesh.ocr.v1.OcrService/jobs``) only while Redis answers.
        """
        from PIL import Image, ImageDraw

        img = Image.new("L", (200, 60), 255)
        ImageDraw.Draw(img).text((10, 20), "warm up", fill=0)
        loop = asyncio.get_running_loop()
        for _ in range(self.extractor.pool.size):
            await loop.run_in_executor(None, self.extractor.pool.recognize, img)
        # Kiwi loads its model on its first analysis, holding the GIL for ~2 s: here, before SERVING.
        await loop.run_in_executor(None, self.extractor.plausibility.score, "준비된 문장입니다")
        await self.jobs.start()
        await self.mesh.set_serving(True)

    async def release(self) -> None:
        """Stop job workers (a job in progress is resumed elsewhere) and release the engines."""
        await self.jobs.close()
        await self.extractor.close()

    async def close(self, grace: float = 1.0) -> None:
        """Stop serving, then release (services/bootstrap/lifecycle.py)."""
        await stop(self, grace)


def engine_revision(settings: OcrSettings, reader: VisionReader | None) -> str:
    """What a cached reading depends on besides the upload and the request's options."""
    import tesserocr

    from services.ocr.cache import READER_REVISION

    reading = settings.model_dump(include={"languages", "max_side", "pdf_dpi", "deskew", "smooth_radius", "flatten",
                                           "line_height", "compare_as_uploaded", "accept_as_uploaded",
                                           "read_clean_once", "min_confidence",
                                           "max_low_word_share", "min_plausible_confidence", "max_uncovered",
                                           "max_sync_pages", "vlm_model"})
    version = tesserocr.tesseract_version().split()[1]
    return f"{version}|{READER_REVISION}|{sorted(reading.items())}|{reader is not None}"


async def create_ocr_service(
    settings: OcrSettings,
    *,
    reader: VisionReader | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    registry: CollectorRegistry = REGISTRY,
) -> OcrService:
    """Create (not start) the service; ``reader`` overrides the VLM built from settings."""
    try:  # engines load in a thread: ~0.1 s each, not on the loop that answers health checks
        pool = await asyncio.to_thread(TesseractPool, settings.tessdata, settings.languages, settings.engines)
    except (RuntimeError, OSError, ValueError) as exc:
        raise StartupError(f"Tesseract cannot load {settings.languages!r} from {settings.tessdata!r} "
                           f"(--languages / --tessdata; scripts/setup.sh installs kor and eng): {exc}") from exc
    reader = reader or make_reader(settings.vlm_kind, settings.vlm_url, settings.vlm_model,
                                     settings.vlm_api_key.get_secret_value())
    limits = Limits(max_bytes=settings.max_bytes, max_pixels=settings.max_pixels, max_pages=settings.max_pages,
                    pdf_dpi=settings.pdf_dpi, max_page_chars=settings.max_page_chars,
                    max_file_chars=settings.max_file_chars, max_xml_bytes=settings.max_xml_bytes,
                    max_nodes=settings.max_nodes)
    readings = ReadingProcesses(Budget(settings.file_budget_s, settings.file_memory_mb), settings.file_readers)
    policy = FallbackPolicy(settings.min_confidence, settings.max_low_word_share,
                            min_plausible_confidence=settings.min_plausible_confidence,
                            max_uncovered=settings.max_uncovered)
    extractor = Extractor(pool, reader, policy, limits, Preprocess(max_side=settings.max_side, deskew=settings.deskew,
                                                                   smooth_radius=settings.smooth_radius),
                          settings.max_pending, settings.vlm_timeout_s,
                          enhance=Enhance(flatten=settings.flatten, deskew=settings.deskew,
                                          line_height=settings.line_height,
                                          compare_as_uploaded=settings.compare_as_uploaded),
                          accept_as_uploaded=settings.accept_as_uploaded,
                          clean=CleanPage() if settings.read_clean_once else None,
                          one_reading_when_busy=settings.one_reading_when_busy)
    jobs = JobStore(extractor, settings.redis_url, ttl_s=settings.job_ttl_s, max_queued=settings.max_queued_jobs,
                    max_pages=settings.max_pages, max_store_bytes=settings.max_store_bytes,
                    workers=settings.job_workers, timeout_s=settings.redis_timeout_s, lease_s=settings.job_lease_s,
                    tracer_provider=tracer_provider, cache_ttl_s=settings.ocr_cache_ttl_s,
                    cache_revision=engine_revision(settings, reader), cache_redis_url=settings.cache_redis_url,
                    png_bytes_per_page=settings.png_bytes_per_page, png_ttl_s=settings.png_ttl_s,
                    mask_margin_px=settings.mask_margin_px, fit_masks=settings.fit_masks,
                    reread_labels=settings.reread_labels, readings=readings)
    # Uploads may be as large as max_bytes (plus framing); a job carries several.
    limit = settings.max_bytes * 4 + 65536
    mesh = await create_server(settings, [ServiceRegistration(SERVICE, OcrServicer(
        extractor, jobs, settings.max_sync_pages,
        FileReader(extractor, settings.max_file_pages, settings.max_file_ocr_pages, readings)))],
                               tracer_provider=tracer_provider, registry=registry,
                               options=[("grpc.max_receive_message_length", limit)],
                               dependencies=[Dependency("redis", jobs.ping)],
                               capabilities={"jobs": Requirement(("redis",))})
    jobs.watch_redis(mesh.monitor)
    return OcrService(mesh=mesh, extractor=extractor, jobs=jobs)
