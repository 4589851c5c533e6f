"""The Kubernetes API over plain HTTPS: a kubeconfig (or the pod's service account) read into a
login (`kubeconfig.py`), and a JSON client with discovery, reads and patches (`api.py`).
drctl asks it for one kind of object only: Strimzi's KafkaMirrorMaker2 and its ConfigMaps."""
