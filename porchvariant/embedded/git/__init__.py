"""The embedded Porch's git layer: packages and their revisions in one git repository, laid out as
Porch lays them out (repository.py: `GitPackageRepository`).

Underneath: revisions read from refs (listing.py, refs.py), facts about immutable objects
remembered (facts.py), commit messages and Porch's trailers (messages.py), blobs and trees
(objects.py), the git processes (commands.py), and for repositories on a git server the local
mirror (mirror.py), the wire and its credentials (transport.py, ssh.py). errors.py names what
can go wrong.
"""
