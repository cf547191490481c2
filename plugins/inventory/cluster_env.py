# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Inventory plugin: the recipe's cluster.env, read as data."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_env
short_description: Use the reference recipe's cluster.env as an inventory
version_added: 0.1.0
author: sparkfleet developers (@sparkfleet)
description:
  - Reads the recipe's C(scripts/cluster.env) (KEY=value lines, quoted lists, comments) without running it
    as shell; C($(...)), backticks, variables and other shell constructs are refused with the line number.
  - Yields the same groups and variables as C(inventory.example/hosts.yml) - one group of engine nodes,
    the head (HEAD_IP) first and the workers (WORKER_IPS) in order, named C(spark1..N) with their fabric
    address as C(ansible_host), and maps the recipe's keys to the collection's variables
    (SSH_USER, NCCL_IB_HCA, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, WEIGHTS, CACHE, IMAGE, NAME, PORT,
    MASTER_PORT, HF_REPO, HF_BASE_IMAGE and the GLM53_* overrides). Missing optional keys take the
    recipe's defaults. Unknown keys are kept as variables and listed in a warning.
  - As in the recipe's scripts, a C(GLM53_*) variable in the environment of the run wins over the file's
    (C(GLM53_LANE), C(GLM53_GMU), C(GLM53_MTP_K), ...); C(GLM53_MAXLEN) and C(GLM53_SEQS) replace the chosen
    lane's max_model_len and max_num_seqs (as C(lane_overrides)).
  - Point C(-i) at a YAML file whose C(plugin) is C(sparkfleet.vllm.cluster_env) and whose C(path) names the
    cluster.env, or directly at a file named C(cluster.env) or C(*.cluster.env).
options:
  plugin:
    description: Marks a YAML source as this plugin's.
    type: str
    choices: [sparkfleet.vllm.cluster_env]
  path:
    description: The cluster.env to read, relative to the YAML source file.
    type: str
    default: cluster.env
  group:
    description: The group of engine nodes.
    type: str
    default: sparks
  host_prefix:
    description: Host names are this prefix and the node's position (head = 1).
    type: str
    default: spark
"""

EXAMPLES = r"""
# inventory/cluster.cluster_env.yml
plugin: sparkfleet.vllm.cluster_env
path: ../scripts/cluster.env

# or directly:
#   ansible-playbook -i scripts/cluster.env site.yml -e lane=500k
"""

import os

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseFileInventoryPlugin
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.sparkfleet.vllm.plugins.module_utils import cluster_env


class InventoryModule(BaseFileInventoryPlugin):
    NAME = "sparkfleet.vllm.cluster_env"

    def verify_file(self, path):
        name = os.path.basename(path)
        if name == "cluster.env" or name.endswith(".cluster.env"):
            return super().verify_file(path)
        if name.endswith((".cluster_env.yml", ".cluster_env.yaml")) or name in ("cluster_env.yml", "cluster_env.yaml"):
            return super().verify_file(path)
        return False

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        if path.endswith((".yml", ".yaml")):
            self._read_config_data(path)
            env_path = os.path.join(os.path.dirname(path), os.path.expanduser(self.get_option("path")))
            group = self.get_option("group")
            prefix = self.get_option("host_prefix")
        else:
            env_path, group, prefix = path, "sparks", "spark"
        try:
            with open(env_path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as error:
            raise AnsibleParserError(f"cannot read cluster.env {env_path}: {error.strerror}") from error
        try:
            found = cluster_env.cluster(cluster_env.parse(text), host_prefix=prefix, environ=os.environ)
        except cluster_env.ClusterEnvError as error:
            raise AnsibleParserError(f"{env_path}: {error}") from error

        self.inventory.add_group(group)
        for rank, (name, address) in enumerate(found["hosts"]):
            self.inventory.add_host(name, group=group)
            # Values from the file are data: marked unsafe, a '{{ ... }}' in them is never templated.
            self.inventory.set_variable(name, "ansible_host", wrap_var(address))
            self.inventory.set_variable(name, "cluster_env_rank", rank)
            # Host level on purpose: inventory-source group vars rank below the
            # collection's group_vars/all, and cluster.env must win over them.
            for key, value in found["vars"].items():
                self.inventory.set_variable(name, key, wrap_var(value))
        if found["from_environment"]:
            # On stderr (a warning): stdout is ansible-inventory's JSON.
            self.display.warning(
                f"{env_path}: from the environment, over the file: " + ", ".join(f"{key}={value}" for key, value in sorted(found["from_environment"].items()))
            )
        if found["unknown"]:
            self.display.warning(f"{env_path}: keys the collection does not use, kept as variables of every host: {', '.join(found['unknown'])}")
