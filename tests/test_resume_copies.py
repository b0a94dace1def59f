"""The refusal when some rank does not see the whole checkpoint rank 0 picked (training/resume_copies.py): its
advice depends on where checkpoints live, shared storage or DeepSpeed's node-local checkpoint folders."""

from __future__ import annotations

from pathlib import Path

from training.resume_copies import incomplete_message

CKPT = Path("/runs/a/checkpoints")
GAPS = [(2, "node-b", ["zero_pp_rank_2_mp_rank_00_optim_states.pt"]), (3, "node-b", ["the folder"])]


def test_node_local_advice_names_rank_0s_latest_and_where_the_missing_files_are():
    """It said "point 'latest' on every node at a checkpoint all of them hold", though rank 0's 'latest' alone
    decides what every rank loads (another node's is never read), and offered shared storage and node-local
    copies alike whatever the launch used."""
    text = incomplete_message(CKPT, "iter_000004", GAPS, node_local=True, rank0_host="node-a")
    assert "iter_000004 is incomplete where rank 2 (host node-b)" in text and "rank 3 (host node-b)" in text
    assert "on every node" not in text, text
    assert f"write the tag of an earlier checkpoint every node holds whole into {CKPT / 'latest'} on host node-a " \
           "(rank 0's 'latest' alone decides what every rank loads)" in text, text
    assert "copy those ranks' files of iter_000004 onto host node-b from the node that saved them" in text
    assert "put output_dir on storage every node shares" not in text


def test_shared_storage_advice_says_every_rank_reads_rank_0s_folder():
    text = incomplete_message(CKPT, "iter_000004", GAPS, node_local=False, rank0_host="node-a")
    assert "on every node" not in text and "point 'latest'" not in text, text
    assert "does not set checkpoint.use_node_local_storage" in text and "every rank reads rank 0's folder" in text
    assert "put output_dir on storage every node shares" in text
    assert f"or copy {CKPT / 'iter_000004'} whole from host node-a to the same path on host node-b" in text, text


SAME_HOST = [(1, "node-a", ["zero_pp_rank_1_mp_rank_00_optim_states.pt"])]


def test_node_local_advice_for_a_rank_on_rank_0s_own_host_does_not_copy_onto_that_host_from_itself():
    """Rank 1 on rank 0's own host lacks its share: the advice said "copy those ranks' files onto host node-a
    from the node that saved them", and the node that saved them was node-a itself (no such copy)."""
    text = incomplete_message(CKPT, "iter_000004", SAME_HOST, node_local=True, rank0_host="node-a")
    assert "onto host node-a from the node that saved them" not in text, text
    assert "rank 1 runs on host node-a, rank 0's own: unless another node ran rank 1 when iter_000004 was saved" \
        in text, text
    assert f"write the tag of an earlier checkpoint every node holds whole into {CKPT / 'latest'} on host node-a" \
        in text, text


def test_node_local_advice_for_both_hosts_copies_only_onto_the_other_host():
    text = incomplete_message(CKPT, "iter_000004", SAME_HOST + GAPS, node_local=True, rank0_host="node-a")
    assert "copy those ranks' files of iter_000004 onto host node-b from the node that saved them" in text, text
    assert "onto host node-a" not in text, text
    assert "rank 1 runs on host node-a, rank 0's own" in text and "rank 2" not in text.split("runs on host")[1], text


def test_shared_storage_advice_for_a_rank_on_rank_0s_own_host_does_not_copy_from_that_host_to_itself():
    """Rank 0 saw every rank's files in its folder (resume_source counts them), so a rank under the same host name
    that lacks them reads another filesystem at that path: "copy ... from host node-a to the same path on host
    node-a" named no copy."""
    text = incomplete_message(CKPT, "iter_000004", SAME_HOST, node_local=False, rank0_host="node-a")
    assert "to the same path on host node-a" not in text, text
    assert "rank 1 runs under host name node-a as rank 0 does" in text and "another filesystem" in text, text
    both = incomplete_message(CKPT, "iter_000004", SAME_HOST + GAPS, node_local=False, rank0_host="node-a")
    assert f"copy {CKPT / 'iter_000004'} whole from host node-a to the same path on host node-b;" in both, both
    assert "mounted for rank 1 too" in both and "; rank 1 runs under host name node-a" in both, both


def test_several_ranks_on_rank_0s_own_host_are_named_in_good_grammar():
    """Two ranks on rank 0's host read "rank 1, 3 runs on host node-a" and "into rank 1, 3's view"."""
    two = [(1, "node-a", ["the folder"]), (3, "node-a", ["the folder"])]
    local = incomplete_message(CKPT, "iter_000004", two, node_local=True, rank0_host="node-a")
    assert "ranks 1 and 3 run on host node-a, rank 0's own: unless another node ran ranks 1 and 3 when iter_000004 " \
           "was saved (copy their files from there)" in local, local
    shared = incomplete_message(CKPT, "iter_000004", two, node_local=False, rank0_host="node-a")
    assert "ranks 1 and 3 run under host name node-a as rank 0 does, yet do not see the files rank 0 found at that " \
           "path, so they read another filesystem there" in shared, shared
    assert f"mounted for ranks 1 and 3 too, or copy {CKPT / 'iter_000004'} whole into their view of the same path" \
        in shared, shared
    three = incomplete_message(CKPT, "iter_000004", [(1, "node-a", ["x"]), *two[1:], (5, "node-a", ["x"])],
                               node_local=True, rank0_host="node-a")
    assert "ranks 1, 3 and 5 run on host node-a" in three, three
    one = incomplete_message(CKPT, "iter_000004", two[:1], node_local=False, rank0_host="node-a")
    assert "rank 1 runs under host name node-a as rank 0 does, yet does not see the files rank 0 found at that " \
           "path, so it reads another filesystem there" in one and "into rank 1's view of the same path" in one, one
