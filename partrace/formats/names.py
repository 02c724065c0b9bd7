"""Location names that tell locations apart: the threads every process names alike
(VampirTrace's CUDA streams "CUDA[0:1]", Score-P's "Master thread") carry their ancestors'
names ("Process 0/CUDA[0:1]"), as Vampir shows a thread under its process, in every output."""
from __future__ import annotations


def under_parents(ids: list[int], names: list[str], parents: list[int],
                  label: str = "location") -> list[str]:
    """Each name prefixed by those of its parents (0: none; a parent not among ``ids`` ends
    the chain) unless it already starts with its parent's; a name that is still another's
    gets its id (``label`` and the id in hex, as the format writes ids)."""
    name = dict(zip(ids, names))
    parent = dict(zip(ids, parents))
    out = []
    for i in ids:
        path, p, seen = name[i], parent.get(i, 0), {i}
        while p in name and p not in seen:
            if not path.startswith(f"{name[p]}/"):
                path = f"{name[p]}/{path}"
            seen.add(p)
            p = parent.get(p, 0)
        out.append(path)
    count: dict[str, int] = {}
    for n in out:
        count[n] = count.get(n, 0) + 1
    return [n if count[n] == 1 else f"{n} ({label} {i:x})" for n, i in zip(out, ids)]


def told_apart(ids: list[int], names: list[str], parents: list[int],
               label: str = "location") -> list[str]:
    """The source's names where they are unique; the others as :func:`under_parents` gives
    them (a unique name is kept as the format wrote it: outputs write it back as is)."""
    count: dict[str, int] = {}
    for n in names:
        count[n] = count.get(n, 0) + 1
    if all(c == 1 for c in count.values()):
        return list(names)
    full = under_parents(ids, names, parents, label)
    return [n if count[n] == 1 else f for n, f in zip(names, full)]
