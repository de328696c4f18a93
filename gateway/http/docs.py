"""The API page (``/docs``, Swagger UI) served from local files, never from a CDN.

FastAPI's own pages load their JavaScript, CSS and favicon from the internet, so they are blank on a
machine without it. The files come from the pinned ``fastapi-offline`` package (Swagger UI 5, which
renders OpenAPI 3.1) and are served under ``/docs/assets``, which the API-key middleware guards like
``/docs`` itself. Swagger UI's online validator badge is switched off: it would send the spec's
address to a public host. There is no ``/redoc``: ReDoc's bundle fetches its logo from its CDN.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"
SWAGGER_PARAMETERS = {"validatorUrl": None}


def install_docs(app: FastAPI, docs_url: str = "/docs") -> None:
    """Serve Swagger UI at ``docs_url`` from the bundled assets.

    The app must be built with ``docs_url=None, redoc_url=None`` so FastAPI's CDN pages are not there.
    """
    assets = files("fastapi_offline") / "static"
    app.mount(ASSETS, StaticFiles(directory=str(assets)), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    oauth2_redirect = app.swagger_ui_oauth2_redirect_url

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}", title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon.png", oauth2_redirect_url=oauth2_redirect,
            swagger_ui_parameters={**SWAGGER_PARAMETERS, **(app.swagger_ui_parameters or {})})

    if oauth2_redirect:
        @app.get(oauth2_redirect, include_in_schema=False)
        async def swagger_ui_redirect() -> HTMLResponse:
            return get_swagger_ui_oauth2_redirect_html()
