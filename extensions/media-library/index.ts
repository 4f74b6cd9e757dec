/**
 * media-library: the Files API (`/api/v1/files`), shipped as a first-party
 * extension. Remove this folder and the Files API is gone (404).
 */
import { defineExtension } from 'basalt';
import { fileRoutes } from './routes';

export default defineExtension({
  name: 'media-library',
  version: '1.0.1',
  description: 'Files API: upload, list, metadata, download (Range, ETag) and delete; data dir or S3 storage.',
  settings: {
    s3_bucket: {
      kind: 'string',
      default: '',
      description: 'S3 bucket for new uploads; empty → files in the data dir.',
    },
    s3_endpoint: { kind: 'string', default: '', description: 'S3 endpoint URL (MinIO, R2, …); empty → AWS.' },
    s3_region: { kind: 'string', default: '', description: 'S3 region.' },
    s3_access_key_id: {
      kind: 'string',
      default: '',
      description: 'S3 access key id; empty → AWS_ACCESS_KEY_ID / S3_ACCESS_KEY_ID.',
    },
    s3_secret_access_key: { kind: 'string', default: '', secret: true, description: 'S3 secret access key.' },
  },
  setup(ctx) {
    fileRoutes(ctx);
  },
});
