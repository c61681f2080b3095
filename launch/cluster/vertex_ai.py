"""--launch_type vertex_ai: the program handed to Launchpad's own Vertex AI launcher."""
from launch.cluster.package import ROOT

VERTEX_AI_NEEDS = (
    "--launch_type vertex_ai needs Launchpad's XManager runtime, which is not installed here: "
    '`pip install -c constraints.txt xmanager google-cloud-aiplatform` (their protobuf must stay '
    '3.19), a local Docker daemon, a GCP project with Vertex AI enabled and credentials '
    '(`gcloud auth application-default login`, GOOGLE_CLOUD_PROJECT), and --run_dir on storage '
    'every container mounts (e.g. /gcs/BUCKET/... through Cloud Storage FUSE); see '
    'docs/cluster.md')


def launch_vertex_ai(cfg, requirements: str) -> None:
  """Passes the program to Launchpad's own Vertex AI launcher (one Docker image, built by
  XManager from this checkout and `requirements`)."""
  try:
    import xmanager  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top
    from launchpad.nodes.python import xm_docker  # pylint: disable=g-import-not-at-top
  except Exception:  # xm_docker raises a bare Exception when xmanager is missing
    raise ValueError(VERTEX_AI_NEEDS) from None
  import launchpad as lp  # pylint: disable=g-import-not-at-top

  from launch.program import layout  # pylint: disable=g-import-not-at-top
  program = layout.build_program(cfg)
  config = xm_docker.DockerConfig(code_directory=ROOT, docker_requirements=requirements)
  lp.launch(program, launch_type='vertex_ai',
            xm_resources={label: config for label in program.groups})
