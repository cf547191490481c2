"""Download a Hugging Face snapshot at a revision into /weights (run inside the engine image).

Resumable: huggingface_hub keeps partial files under /weights/.cache and
completes them on the next run. The token comes from HF_TOKEN, never argv.
Exit 2 with one line naming the repository or revision when the Hub refuses.
"""

import sys

from huggingface_hub import snapshot_download
from huggingface_hub.utils import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

repo, revision = sys.argv[1], sys.argv[2]
try:
    path = snapshot_download(repo_id=repo, revision=revision, local_dir="/weights")
except RevisionNotFoundError:
    sys.exit(f"revision {revision!r} does not exist in {repo}: set model_weights_revision to a commit or branch of it")
except GatedRepoError:
    sys.exit(f"{repo} is gated: accept its terms on huggingface.co and set model_weights_hf_token (vaulted)")
except RepositoryNotFoundError:
    sys.exit(f"repository {repo} not found (or private without a token): check model_repo / model_weights_hf_token")
print(path)
