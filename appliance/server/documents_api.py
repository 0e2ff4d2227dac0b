"""`/v1/documents`: list, upload, remove and re-index over HTTP, through the documents service.

Reads are for any user with a key and show the collections that user may read; uploads follow
`upload_requires_admin` and go to a collection the uploader may write; remove and re-index are for
administrators. Ingest work runs in a thread so the event loop keeps serving chat.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, UploadFile
from pydantic import BaseModel, Field, field_validator

from appliance.server import wire
from appliance.server.auth import User
from appliance.server.deps import admin_user, current_user, local_admin, services
from appliance.server.services import Services
from knowledge.errors import IndexWriteError, KnowledgeError
from knowledge.index.access import COLLECTION_FIELD, COLLECTION_NAME, DEFAULT_COLLECTION, check_collection
from knowledge.index.manifest import FileRecord
from knowledge.ingest.report import IngestReport

router = APIRouter(prefix="/v1/documents")
_CHUNK = 1 << 20


def _record(r: FileRecord) -> dict:
    return {"source": r.source, "root": r.root, "kind": r.kind, "status": r.status,
            "chunks": len(r.chunk_ids), "error": r.error, "size": r.size, "collection": r.collection}


def _report(r: IngestReport) -> dict:
    return r.summary()


@router.get("")
def list_documents(user: User = Depends(current_user), svc: Services = Depends(services)) -> dict:
    scope = svc.access.scope_for(user)
    return {"object": "list", "data": [_record(r) for r in svc.documents.list(scope)],
            "stats": svc.documents.stats(scope)}


@router.post("")
async def upload_documents(files: Annotated[list[UploadFile], File(min_length=1)],
                           collection: str = Form(DEFAULT_COLLECTION, pattern=COLLECTION_FIELD),
                           user: User = Depends(current_user), svc: Services = Depends(services)) -> dict:
    if svc.settings.upload_requires_admin and not user.is_admin:
        raise wire.ApiError(403, "uploads are for administrators (upload_requires_admin)", "forbidden",
                            "permission_error")
    check_writable(svc, user, collection)
    limit = int(svc.settings.knowledge.max_file_mb * 2**20)
    with tempfile.TemporaryDirectory(prefix="appliance-upload-") as tmp:
        saved = [(f.filename or "upload", await _save(f, Path(tmp) / str(i), limit)) for i, f in enumerate(files)]
        report = await _write(svc.documents.upload, saved, None, collection)
    return _report(report)


def check_writable(svc: Services, user: User, collection: str) -> None:
    """403 unless `user` may add documents to `collection` (400 for a name that cannot be one).
    Administrators may write any collection; a new name creates it."""
    try:
        check_collection(collection)
    except KnowledgeError as e:
        raise wire.ApiError(400, str(e), "invalid_collection") from None
    if not user.is_admin and collection not in svc.access.writable(user):
        raise wire.ApiError(403, f"you may not add documents to collection {collection!r}", "forbidden",
                            "permission_error")


async def _write(fn, *args):
    """Run an index write in a thread; a failed write (a full disk) is 507 with its message, not a 500."""
    try:
        return await asyncio.to_thread(fn, *args)
    except IndexWriteError as e:
        raise wire.ApiError(507 if e.disk_full else 500, str(e), "index_write_failed") from None


async def _save(upload: UploadFile, target: Path, limit: int) -> Path:
    """Copy an upload to `target`, refusing it as soon as it passes the size limit."""
    written = 0
    with target.open("wb") as out:
        while chunk := await upload.read(_CHUNK):
            written += len(chunk)
            if written > limit:
                raise wire.ApiError(413, f"{upload.filename}: over the size limit ({limit // 2**20} MB)",
                                    "file_too_large")
            out.write(chunk)
    return target


@router.delete("/{source:path}")
async def remove_document(source: str, user: User = Depends(admin_user), svc: Services = Depends(services)) -> dict:
    try:
        removed = await _write(svc.documents.remove, source)
    except KnowledgeError as e:
        raise wire.ApiError(404, str(e), "not_found") from None
    return {"removed": [_record(r) for r in removed]}


class FolderIngest(BaseModel):
    folder: str = Field(pattern="^/", description="An absolute path on the server's own disk.")
    collection: str | None = Field(None, pattern=COLLECTION_NAME)

    @field_validator("folder", mode="before")
    @classmethod
    def _absolute(cls, value: object) -> object:
        """Say what is wrong in words (before the schema's pattern would answer with a regex)."""
        if isinstance(value, str) and not value.startswith("/"):
            raise ValueError("must be an absolute path on the server's own disk")
        return value


@router.post("/ingest")
async def ingest_folder(body: FolderIngest, user: User = Depends(local_admin),
                        svc: Services = Depends(services)) -> dict:
    """Index a folder on the server's own disk: for `appliance ingest` run beside a running server
    (the local token only, so a network admin cannot make the server read arbitrary paths)."""
    folder = Path(body.folder)
    if not folder.is_dir():
        raise wire.ApiError(404, f"{body.folder}: no such folder on the server", "folder_not_found")
    if body.collection is not None:
        check_writable(svc, user, body.collection)
    return _report(await _write(svc.documents.ingest, folder.resolve(), None, body.collection))


@router.post("/reindex")
async def reindex(user: User = Depends(admin_user), svc: Services = Depends(services)) -> dict:
    reports = await _write(svc.documents.reindex)
    return {"reports": [_report(r) for r in reports]}
