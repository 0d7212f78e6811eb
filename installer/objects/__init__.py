"""Kubernetes objects as the installer owns them: apply, prune and delete (manifests), ownership and field
takeover, generated credentials and certificates, rollouts, images, the cc (cluster). The Ansible side: the ks_* tasks
run this code."""
