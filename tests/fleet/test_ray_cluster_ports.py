"""The test cluster's own ports: `ray start` refuses a node given one port for two of its components
("Ray component metrics_export is trying to use a port number … that is used by other components"),
which ended a whole run of the suite's Ray group at its cluster's start once. No Ray is started here."""

import itertools

from fixtures import ray_cluster as rc


class _KernelRepeating:
    """A socket whose bind to port 0 gets each port twice in a row, as the kernel may hand it out."""

    ports = itertools.chain.from_iterable((p, p) for p in itertools.count(40001))

    def __init__(self, *args):
        self.port = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def bind(self, address):
        self.port = next(self.ports)

    def getsockname(self):
        return ("127.0.0.1", self.port)


def _ports(argv: list[str]) -> list[int]:
    return [int(value) for flag, value in zip(argv, argv[1:]) if flag.endswith("-port")]


def test_no_two_components_of_the_cluster_are_given_one_port(tmp_path, monkeypatch):
    monkeypatch.setattr(rc.socket, "socket", _KernelRepeating)
    cluster = rc.RayTestCluster(tmp_path, "marker")
    head = cluster._start_argv("head", tmp_path, head=True, num_gpus=0, resources=None, num_cpus=1)
    node = cluster._start_argv("node", tmp_path, head=False, num_gpus=0, resources=None, num_cpus=1)
    ports = _ports(head) + _ports(node)
    assert len(_ports(head)) == 9 and len(_ports(node)) == 6, (head, node)
    assert len(set(ports)) == len(ports), ports
    assert f"127.0.0.1:{_ports(head)[6]}" == cluster.gcs_address  # the head's --port
    assert rc._free_port(cluster.ports) not in ports  # a test's own port (a second proxy's) is one more
