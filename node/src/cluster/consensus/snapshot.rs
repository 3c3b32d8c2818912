//! What a Raft snapshot's data holds: the members' node ids (raft's conf state has only raft
//! ids, and a catching-up learner must be able to address them) and the topology image.

use super::codec::{CodecError, Reader, Writer};
use super::image::{TopologyImage, IMAGE_BYTES_MAX};
use super::raft_id::DIRECTORY_MAX;
use crate::cluster::id::{NodeId, ID_LEN};

pub const SNAPSHOT_FORMAT: u8 = 1;

/// Largest snapshot data: an image plus every member's id.
pub const SNAPSHOT_BYTES_MAX: usize = IMAGE_BYTES_MAX + DIRECTORY_MAX * ID_LEN + 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotPayload {
    pub members: Vec<NodeId>,
    pub image: TopologyImage,
}

impl SnapshotPayload {
    pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
        if self.members.len() > DIRECTORY_MAX {
            return Err(CodecError::TooMany {
                what: "members",
                count: self.members.len(),
                max: DIRECTORY_MAX,
            });
        }
        let image = self.image.encode()?;
        let mut w = Writer::default();
        w.u8(SNAPSHOT_FORMAT);
        w.u32(self.members.len() as u32);
        for m in &self.members {
            w.id(m);
        }
        w.bytes32(&image);
        Ok(w.buf)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let mut r = Reader::new(bytes, SNAPSHOT_BYTES_MAX)?;
        let format = r.u8()?;
        if format != SNAPSHOT_FORMAT {
            return Err(CodecError::UnknownVersion(format));
        }
        let count = r.count("members", DIRECTORY_MAX)?;
        let members = (0..count).map(|_| r.id()).collect::<Result<Vec<_>, _>>()?;
        let image = TopologyImage::decode(r.bytes32("image", IMAGE_BYTES_MAX)?)?;
        r.finish()?;
        Ok(SnapshotPayload { members, image })
    }
}
