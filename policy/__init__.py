"""The world model as a policy: flow-matching wrapper over diffusers video transformers and the
DynDiff sampler (DESIGN.md §5). Import the submodules directly (``policy.dyndiff``,
``policy.world_model``, ``policy.rollout``); nothing is imported here so ``import policy`` stays cheap."""
