"""Parse every rank's `vllm serve` argv with the vLLM inside the engine image, before any rank stops.

Passed to `python -c` inside the image by the engine role (nothing is written, no GPU, no network).
argv[1]: a JSON mapping of named argv sets (this run's, and every lane's), each a list of argv lists,
one per rank, each starting with "vllm", "serve". vLLM is imported once for all of them: the import
is the cost, a parse is milliseconds. Prints one JSON line:
{"vllm": version, "sets": {name: [{"rank": i, "error": argparse's message or null}]}}.
The parser is the one `vllm serve` itself builds, so an unknown, misspelt or renamed flag gets vLLM's
own words, seconds into a run instead of after a 12-15 minute boot.
"""

import importlib.metadata
import json
import sys


class ParseRefused(Exception):
    """argparse's error, raised instead of printing usage and exiting."""


def serve_parser():
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # vLLM before the move of its argparse helpers
        from vllm.utils import FlexibleArgumentParser
    from vllm.entrypoints.cli.serve import ServeSubcommand

    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(dest="subparser")
    serve = ServeSubcommand().subparser_init(subparsers)

    def refuse(message):
        raise ParseRefused(message)

    for each in (parser, serve):
        each.error = refuse
    return parser


def parse_ranks(parser, argvs):
    ranks = []
    for rank, argv in enumerate(argvs):
        try:
            parser.parse_args(argv[1:])
            error = None
        except ParseRefused as refused:
            error = str(refused)
        ranks.append({"rank": rank, "error": error})
    return ranks


def main(argv_sets):
    parser = serve_parser()
    sets = {name: parse_ranks(parser, argvs) for name, argvs in argv_sets.items()}
    print(json.dumps({"vllm": importlib.metadata.version("vllm"), "sets": sets}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
