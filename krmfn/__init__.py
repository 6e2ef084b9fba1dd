"""krmfn: a KRM-function SDK and the functions built on it.

To come: ResourceList reading and writing without YAML corruption, results, typed functionConfig,
selection helpers, and the Δ pipeline as a kpt function (`porchkit fn deltapipe`).
"""
