"""Uploading a published folder, or a trained model's, to the Hugging Face Hub."""

from __future__ import annotations

from pathlib import Path

from toolscale.errors import ToolscaleError


def upload(
    folder: str | Path, repo: str, private: bool = False, token: str | None = None, repo_type: str = "dataset",
    ignore: list[str] | None = None,
) -> str:  # fmt: skip
    """Create (or reuse) the repo (a dataset, or a model) and make its files the folder's (but for
    the `ignore` patterns); return its URL."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(token=token)
    try:
        api.create_repo(repo, repo_type=repo_type, private=private, exist_ok=True)
        # one commit that also deletes every remote file this upload does not write (an earlier
        # publish's shards would otherwise load beside the new ones); the Hub keeps .gitattributes
        api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type=repo_type, delete_patterns="*",
                          ignore_patterns=ignore)  # fmt: skip
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        hint = " (is HF_TOKEN set to a token with write access?)" if status in (401, 403) else ""
        raise ToolscaleError(f"upload to {repo} failed: HTTP {status}{hint}") from None
    except Exception as exc:  # network and auth errors come from httpx/requests/hub: one line each
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ToolscaleError(f"upload to {repo} failed: {type(exc).__name__}: {first}") from None
    return f"{api.endpoint.rstrip('/')}/{'datasets/' if repo_type == 'dataset' else ''}{repo}"
