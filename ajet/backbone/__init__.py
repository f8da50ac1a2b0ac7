"""Backbones run training: `debug` in this process, `swift` and `llamafactory` through their own
frameworks, and any other registered under the entry-point group `ajet.backbones`.
`ajet.backbones` finds them (it imports nothing heavy); `ajet.backbone.registry.run_backbone` starts one."""
