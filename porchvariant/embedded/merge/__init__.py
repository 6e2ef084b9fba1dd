"""The upgrade task's 3-way merge, kpt's `resource-merge` strategy of `kpt pkg update`, over
packages given as `{path: text}` (resources.py: `merge_packages`).

Underneath: a file's documents and their identities (documents.py), the merge of two changes to
one object (three_way.py) with Kubernetes' list merge keys (schema.py), the Kptfile's own rules
(kptfile.py), and the merged data written back into the local text, keeping comments (apply.py).
"""
