/* Prints the sizes and field offsets of the libfabric 1.17 structs that bus/src/ofi/sys.rs
 * declares. Not part of the build: run it by hand against the installed headers
 * (libfabric-dev, not in install-deps.sh: only this by-hand check needs it) when moving to
 * another libfabric version, and update the consts in
 * sys.rs `layout_tests`:
 *   gcc -o /tmp/layout_probe bus/src/ofi/layout_probe.c && /tmp/layout_probe
 */
#include <stdio.h>
#include <stddef.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#define S(t) printf("size %s %zu\n", #t, sizeof(struct t));
#define O(t,f) printf("off %s.%s %zu\n", #t, #f, offsetof(struct t, f));
int main(void){
S(fi_info) O(fi_info,caps) O(fi_info,mode) O(fi_info,addr_format) O(fi_info,src_addrlen) O(fi_info,dest_addrlen) O(fi_info,src_addr) O(fi_info,dest_addr) O(fi_info,handle) O(fi_info,tx_attr) O(fi_info,rx_attr) O(fi_info,ep_attr) O(fi_info,domain_attr) O(fi_info,fabric_attr) O(fi_info,nic)
S(fi_tx_attr) O(fi_tx_attr,inject_size) O(fi_tx_attr,size) O(fi_tx_attr,rma_iov_limit) O(fi_tx_attr,tclass)
S(fi_rx_attr) O(fi_rx_attr,total_buffered_recv) O(fi_rx_attr,size) O(fi_rx_attr,iov_limit)
S(fi_ep_attr) O(fi_ep_attr,type) O(fi_ep_attr,max_msg_size) O(fi_ep_attr,mem_tag_format) O(fi_ep_attr,auth_key)
S(fi_domain_attr) O(fi_domain_attr,name) O(fi_domain_attr,threading) O(fi_domain_attr,data_progress) O(fi_domain_attr,av_type) O(fi_domain_attr,mr_mode) O(fi_domain_attr,mr_key_size) O(fi_domain_attr,cq_data_size) O(fi_domain_attr,mr_iov_limit) O(fi_domain_attr,caps) O(fi_domain_attr,auth_key) O(fi_domain_attr,max_err_data) O(fi_domain_attr,mr_cnt) O(fi_domain_attr,tclass)
S(fi_fabric_attr) O(fi_fabric_attr,name) O(fi_fabric_attr,prov_name) O(fi_fabric_attr,prov_version) O(fi_fabric_attr,api_version)
S(fi_ops) O(fi_ops,close) O(fi_ops,bind) O(fi_ops,control) O(fi_ops,ops_set)
S(fid) O(fid,context) O(fid,ops)
S(fi_ops_fabric) O(fi_ops_fabric,domain) O(fi_ops_fabric,domain2)
S(fid_fabric) O(fid_fabric,ops) O(fid_fabric,api_version)
S(fi_ops_domain) O(fi_ops_domain,av_open) O(fi_ops_domain,cq_open) O(fi_ops_domain,endpoint) O(fi_ops_domain,endpoint2)
S(fi_ops_mr) O(fi_ops_mr,reg) O(fi_ops_mr,regattr)
S(fid_domain) O(fid_domain,ops) O(fid_domain,mr)
S(fid_mr) O(fid_mr,mem_desc) O(fid_mr,key)
S(fi_av_attr) O(fi_av_attr,count) O(fi_av_attr,name) O(fi_av_attr,flags)
S(fi_ops_av) O(fi_ops_av,insert) O(fi_ops_av,remove) O(fi_ops_av,lookup) O(fi_ops_av,av_set)
S(fid_av) O(fid_av,ops)
S(fi_cq_attr) O(fi_cq_attr,flags) O(fi_cq_attr,format) O(fi_cq_attr,wait_obj) O(fi_cq_attr,signaling_vector) O(fi_cq_attr,wait_cond) O(fi_cq_attr,wait_set)
S(fi_cq_data_entry) O(fi_cq_data_entry,flags) O(fi_cq_data_entry,len) O(fi_cq_data_entry,buf) O(fi_cq_data_entry,data)
S(fi_cq_err_entry) O(fi_cq_err_entry,tag) O(fi_cq_err_entry,olen) O(fi_cq_err_entry,err) O(fi_cq_err_entry,prov_errno) O(fi_cq_err_entry,err_data) O(fi_cq_err_entry,err_data_size)
S(fi_ops_cq) O(fi_ops_cq,read) O(fi_ops_cq,readerr) O(fi_ops_cq,sread) O(fi_ops_cq,strerror)
S(fid_cq) O(fid_cq,ops)
S(fi_ops_ep) O(fi_ops_ep,cancel) O(fi_ops_ep,tx_size_left)
S(fi_ops_cm) O(fi_ops_cm,setname) O(fi_ops_cm,getname) O(fi_ops_cm,join)
S(fi_ops_msg) O(fi_ops_msg,recv) O(fi_ops_msg,send) O(fi_ops_msg,inject) O(fi_ops_msg,senddata) O(fi_ops_msg,injectdata)
S(fi_ops_rma) O(fi_ops_rma,read) O(fi_ops_rma,write) O(fi_ops_rma,inject) O(fi_ops_rma,writedata) O(fi_ops_rma,injectdata)
S(fid_ep) O(fid_ep,ops) O(fid_ep,cm) O(fid_ep,msg) O(fid_ep,rma) O(fid_ep,collective)
printf("FI_VERSION %u\n", FI_VERSION(1,17));
printf("FI_EAVAIL %d FI_ETRUNC %d FI_ECANCELED %d FI_EACCES %d FI_EKEYREJECTED %d FI_EAGAIN %d FI_EINVAL %d FI_EIO %d FI_ECONNREFUSED %d FI_EHOSTUNREACH %d FI_ETIMEDOUT %d FI_ENOENT %d FI_ECONNRESET %d FI_ENOTCONN %d FI_EADDRNOTAVAIL %d FI_ENODATA %d FI_EOVERRUN %d FI_EREMOTEIO %d\n", FI_EAVAIL, FI_ETRUNC, FI_ECANCELED, FI_EACCES, FI_EKEYREJECTED, FI_EAGAIN, FI_EINVAL, FI_EIO, FI_ECONNREFUSED, FI_EHOSTUNREACH, FI_ETIMEDOUT, FI_ENOENT, FI_ECONNRESET, FI_ENOTCONN, FI_EADDRNOTAVAIL, FI_ENODATA, FI_EOVERRUN, FI_EREMOTEIO);
return 0;}
